import sys

from LambdaSegmentLib.cli import main

sys.exit(main())
