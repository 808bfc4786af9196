import sys

import six

print("exe", sys.executable, "six", six.__version__, flush=True)
