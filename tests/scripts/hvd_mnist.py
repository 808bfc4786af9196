"""Seed 002's Horovod script shape, run unmodified: hvd.init(), the learning rate scaled by
hvd.size(), hvd.broadcast_parameters / broadcast_optimizer_state, hvd.DistributedOptimizer, a
DistributedSampler over MNIST-shaped data (synthetic: 28x28 grayscale, 10 classes)."""
import argparse
import hashlib

import horovod.torch as hvd
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
if hvd.rank() == args.fail_rank:
    print(f"rank {hvd.rank()} failing on purpose", flush=True)
    raise SystemExit(3)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.view(-1, 320)))), dim=1)


g = torch.Generator().manual_seed(0)
images, labels = torch.randn(512, 1, 28, 28, generator=g), torch.randint(0, 10, (512,), generator=g)
dataset = TensorDataset(images, labels)
sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
loader = DataLoader(dataset, batch_size=32, sampler=sampler)

torch.manual_seed(1000 + hvd.rank())  # different initial weights per rank: the broadcast must fix that
model = Net()
optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.5)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def digest() -> str:
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]


start = digest()
for epoch in range(1, args.epochs + 1):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"rank {hvd.rank()} epoch {epoch} loss {loss.item():.4f}", flush=True)
print(f"rank {hvd.rank()} of {hvd.size()} start {start} params {digest()}", flush=True)
