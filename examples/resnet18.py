"""ResNet-18 for 1 x 28 x 28 images (Fashion-MNIST): the BasicBlock network of He et al., "Deep
Residual Learning for Image Recognition" (2016), stages of [2, 2, 2, 2] blocks at widths 64, 128,
256, 512, strides 1, 2, 2, 2. The ImageNet stem (7x7 stride-2 convolution and a max-pool) would
shrink a 28 x 28 image to 7 x 7 before the first block, so the stem is one 3x3 stride-1
convolution, as for CIFAR: the stages see 28, 14, 7 and 4 pixels a side. 11.17M parameters with
10 classes. Written here because torchvision is not installed beside Debian's torch."""

import torch.nn as nn
import torch.nn.functional as F


def conv3x3(cin, cout, stride=1):
    # No bias: the batch norm after every convolution has its own shift.
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; the shortcut is the identity, or a 1x1 strided
    convolution where the block changes the width or the resolution."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, cout, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv3x3(cout, cout), nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes=10, channels=1):
        super().__init__()
        self.stem = nn.Sequential(conv3x3(channels, 64), nn.BatchNorm2d(64), nn.ReLU())
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        h = self.blocks(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))
