"""Sleeps, then reads a file of its own source folder: the run must see the submitted version."""
import time

time.sleep(float(open("delay.txt").read()))
print("message:", open("message.txt").read().strip(), flush=True)
