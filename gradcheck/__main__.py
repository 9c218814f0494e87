"""python -m gradcheck [--device cpu|strict|cuda] [--dtype float64|float32] [--only NAME]"""

import sys

from minitorch_attn.gradcheck.command import main

sys.exit(main())
