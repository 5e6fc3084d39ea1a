from trysquare._console import main

raise SystemExit(main())
