"`python -m flashspec ...`: the same command line as the `flashspec` console script."
from .cli.main import main

if __name__ == "__main__": raise SystemExit(main())
