# Row softmax, fp32 (KernelBench format, written for ksol's row-operator comparisons): the same function as tasks/llm/softmax_f32 (tensor table X, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(R, C).to(torch.float32)]


def get_init_inputs():
    return []
