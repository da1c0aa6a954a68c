"""Flask extensions, made unbound here and bound to the app in ``create_app``."""

from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

from queuelog.i18n import CatalogBabel

babel = CatalogBabel()  # the pages' catalogs, read without compiling them into files
csrf = CSRFProtect()
login_manager = LoginManager()
login_manager.login_view = "web_auth.login"
login_manager.session_protection = "basic"
