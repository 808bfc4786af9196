"""A 2-rank gloo DDP step that finishes its work, then dies in native teardown.

glibc's on_exit() runs a handler when the process calls exit(), after Python has finished; abort() there
is exactly what a C++ static destructor's std::terminate does to a finished rank ("terminate called
without an active exception"), but every time instead of 1 run in 16. `--then N` ends the script with
sys.exit(N) instead; `--then raise` with an exception; `--then kill` kills the rank by a signal.
"""
import ctypes
import os
import signal
import sys

import torch
import torch.distributed as dist

then = sys.argv[sys.argv.index("--then") + 1] if "--then" in sys.argv else "done"
dist.init_process_group("gloo")
tensor = torch.ones(1)
dist.all_reduce(tensor)
os.makedirs("outputs", exist_ok=True)
with open(f"outputs/rank{dist.get_rank()}.txt", "w") as f:
    f.write(str(int(tensor.item())))
dist.destroy_process_group()
libc = ctypes.CDLL(None)
libc.on_exit(libc.abort, None)
print(f"rank {os.environ['RANK']} finished its work", flush=True)
if then == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if then == "raise":
    raise RuntimeError("a real failure after the work")
if then != "done":
    sys.exit(int(then))
