"`python -m flashspec ...`: the same command line as the `flashspec` console script."
from .cli import main

if __name__ == "__main__": raise SystemExit(main())
