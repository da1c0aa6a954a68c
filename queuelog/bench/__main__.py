from queuelog.bench import main

raise SystemExit(main())
