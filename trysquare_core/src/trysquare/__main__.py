from trysquare.cli import main

raise SystemExit(main())
