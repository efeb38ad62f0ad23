"""A small multilayer perceptron in numpy: forward, gradients for training, and the
vector-Jacobian product with respect to its input that real-time chunking's guidance needs.

Layers are affine maps with ``tanh`` between them (none after the last). The weights are a
dict of arrays named ``w0, b0, w1, b1, ...`` so they save to and load from one ``.npz`` file.
Written out by hand, not with an autograd library, so a policy built on it serves without
torch: the backward pass of a tanh MLP is a few lines.
"""

from __future__ import annotations

import itertools

import numpy as np

Weights = dict[str, np.ndarray]


def init_weights(sizes: list[int], rng: np.random.Generator) -> Weights:
    """Weights for layers of `sizes` (input first), scaled so activations keep their size."""
    weights: Weights = {}
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        scale = np.sqrt(1.0 / fan_in)
        weights[f"w{index}"] = rng.normal(0.0, scale, (fan_in, fan_out)).astype(np.float32)
        weights[f"b{index}"] = np.zeros(fan_out, np.float32)
    return weights


def layer_count(weights: Weights) -> int:
    """How many affine layers `weights` holds."""
    return len(weights) // 2


def forward(weights: Weights, inputs: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output for `inputs` ``[N, in]``, and each layer's input (kept for the backward pass)."""
    layers = layer_count(weights)
    activations = [inputs]
    hidden = inputs
    for index in range(layers):
        hidden = hidden @ weights[f"w{index}"] + weights[f"b{index}"]
        if index < layers - 1:
            hidden = np.tanh(hidden)
        activations.append(hidden)
    return hidden, activations


def backward(
    weights: Weights, activations: list[np.ndarray], output_grad: np.ndarray
) -> tuple[Weights, np.ndarray]:
    """Gradients of a loss with respect to the weights and to the input, given the loss's
    gradient with respect to the output and the activations `forward` kept."""
    grads: Weights = {}
    grad = output_grad
    for index in reversed(range(layer_count(weights))):
        if index < layer_count(weights) - 1:
            grad = grad * (1.0 - activations[index + 1] ** 2)  # through tanh
        grads[f"w{index}"] = activations[index].T @ grad
        grads[f"b{index}"] = grad.sum(axis=0)
        grad = grad @ weights[f"w{index}"].T
    return grads, grad


class Adam:
    """The Adam optimiser over a `Weights` dict, updated in place."""

    def __init__(self, weights: Weights, learning_rate: float) -> None:
        self.learning_rate = learning_rate
        self._first = {name: np.zeros_like(value) for name, value in weights.items()}
        self._second = {name: np.zeros_like(value) for name, value in weights.items()}
        self._steps = 0

    def step(
        self, weights: Weights, grads: Weights, beta1: float = 0.9, beta2: float = 0.999
    ) -> None:
        """One update of `weights` by `grads`."""
        self._steps += 1
        correction = np.sqrt(1 - beta2**self._steps) / (1 - beta1**self._steps)
        for name, grad in grads.items():
            self._first[name] = beta1 * self._first[name] + (1 - beta1) * grad
            self._second[name] = beta2 * self._second[name] + (1 - beta2) * grad * grad
            update = correction * self._first[name] / (np.sqrt(self._second[name]) + 1e-8)
            weights[name] -= (self.learning_rate * update).astype(weights[name].dtype)
