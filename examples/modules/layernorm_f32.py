# LayerNorm over the last dim, fp32, eps 1e-5 (KernelBench format, written for ksol's row-operator comparisons): tasks/llm/layernorm_f32 (X, W, B, Y).
import torch
import torch.nn as nn

R, C = 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(C, eps=1e-5)
        with torch.no_grad():
            self.ln.weight.add_(0.1 * torch.randn(C))
            self.ln.bias.add_(0.1 * torch.randn(C))

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(R, C).to(torch.float32)]


def get_init_inputs():
    return []
