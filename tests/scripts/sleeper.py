import os
import time

print(f"rank {os.environ['RANK']} sleeping pid={os.getpid()}", flush=True)
time.sleep(120)
