"""The baseline: a plain hand-written PyTorch training loop, what a user would write without mltrain.

Same torchvision model, data, transforms, batch size and threads as `mltrain`'s default job.
Prints the images/second of its last epoch.
"""
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms

train_dir, epochs, batch, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(1)
tf = transforms.Compose([transforms.RandomResizedCrop(size, scale=(0.6, 1.0)), transforms.ToTensor(),
                         transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
ds = datasets.ImageFolder(train_dir, transform=tf)
loader = DataLoader(ds, batch_size=batch, shuffle=True)
model = models.resnet18(num_classes=len(ds.classes))
opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)
loss_fn = nn.CrossEntropyLoss()
for _epoch in range(epochs):
    model.train()
    start, seen = time.perf_counter(), 0
    for x, y in loader:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += y.size(0)
    rate = seen / (time.perf_counter() - start)
print(f"{rate:.2f}")
