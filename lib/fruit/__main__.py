from fruit.cli import main

raise SystemExit(main())
