import sys

from ddpsim.cli.main import main

sys.exit(main())
