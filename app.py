from queuelog import create_app

app = create_app()
