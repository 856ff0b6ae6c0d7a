import sys

from LambdaSegmentLib.cli import main

if __name__ == "__main__":  # not when a helper process (multiprocessing "spawn") imports it as __mp_main__
    sys.exit(main())
