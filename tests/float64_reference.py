"""A float64 NumPy biLM written from bilm-tf's equations, and random-weight models whose clips fire.

The reference reads the weights in the published (TF) layout straight from the HDF5 datasets and runs one
sentence at a time, with no packing or batching, so it shares nothing with the code it checks but the weight
file. It counts the values its clips change, so a test can show that they fired.
"""

import json
from pathlib import Path

import h5py
import numpy as np

from elmo import BiLM, BiLMConfig, load_bilm
from elmo.weights import expected_datasets, read_datasets

SENTENCES = [
    ["The", "bank", "of", "the", "river", "."],
    ["小米", "手机", "很", "好用"],
    ["a"],
    [],
    ["Unbelievably", "long-winded", "tokenization-of-hyphenated-words-that-run-past-forty-eight-bytes", "!"],
]


def _options(activation: str, n_filters_last: int, dim: int, projection_dim: int, skip: bool) -> dict:
    return {
        "char_cnn": {
            "activation": activation,
            "embedding": {"dim": 5},
            "filters": [[1, 3], [2, 4], [4, n_filters_last]],
            "max_characters_per_token": 50,
            "n_characters": 262,
            "n_highway": 2,
        },
        "lstm": {
            "cell_clip": 0.7,
            "dim": dim,
            "n_layers": 3,
            "proj_clip": 0.4,
            "projection_dim": projection_dim,
            "use_skip_connections": skip,
        },
    }


def _without_clips(options: dict) -> dict:
    return {**options, "lstm": {**options["lstm"], "cell_clip": 0, "proj_clip": 0}}


CASES = {
    # every dimension different; CNN and LSTM projections present; skip connections
    "all-projections": _options("relu", n_filters_last=6, dim=11, projection_dim=7, skip=True),
    # 3 + 4 + 2 filters == projection_dim == dim: bilm-tf has neither CNN_proj nor W_P_0 here
    "no-projections": _options("tanh", n_filters_last=2, dim=9, projection_dim=9, skip=False),
    # no clipping: the LSTM runs as PyTorch's fused LSTM (cuDNN on CUDA)
    "no-clips": _without_clips(_options("relu", n_filters_last=6, dim=11, projection_dim=7, skip=True)),
}


def random_weight_file(path: Path, config: BiLMConfig, seed: int) -> None:
    """N(0, 0.6) weights: large enough that both clips of ``CASES`` fire."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as handle:
        for name, shape in expected_datasets(config).items():
            handle.create_dataset(name, data=rng.normal(0.0, 0.6, size=shape).astype(np.float32))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class Reference:
    """The biLM of bilm-tf, equation by equation, in float64."""

    def __init__(self, weights: dict[str, np.ndarray], options: dict) -> None:
        self.w = {name: array.astype(np.float64) for name, array in weights.items()}
        self.cnn, self.lstm = options["char_cnn"], options["lstm"]
        self.cell_clips_fired = 0
        self.proj_clips_fired = 0

    @classmethod
    def from_files(cls, options_file: Path, weight_file: Path) -> "Reference":
        """The reference of a model in the published layout (options JSON, HDF5 weights)."""
        options = json.loads(Path(options_file).read_text())
        return cls(read_datasets(weight_file, BiLMConfig.from_options(options)), options)

    def char_ids(self, token: str) -> list[int]:
        if token in ("<S>", "</S>"):
            symbols = [256 if token == "<S>" else 257]
        else:
            symbols = list(token.encode("utf-8", "ignore")[:48])
        raw = [258, *symbols, 259] + [260] * (50 - len(symbols) - 2)
        return [symbol + 1 for symbol in raw]

    def token_vector(self, token: str) -> np.ndarray:
        table = np.vstack([np.zeros((1, self.cnn["embedding"]["dim"])), self.w["char_embed"]])
        chars = table[self.char_ids(token)]  # (50, e)
        features = []
        for i, (width, _) in enumerate(self.cnn["filters"]):
            kernel, bias = self.w[f"CNN/W_cnn_{i}"][0], self.w[f"CNN/b_cnn_{i}"]  # (width, e, n)
            positions = [
                sum(chars[start + k] @ kernel[k] for k in range(width)) + bias for start in range(50 - width + 1)
            ]
            pooled = np.max(positions, axis=0)
            features.append(np.tanh(pooled) if self.cnn["activation"] == "tanh" else np.maximum(pooled, 0.0))
        x = np.concatenate(features)
        for k in range(self.cnn["n_highway"]):
            gate = _sigmoid(x @ self.w[f"CNN_high_{k}/W_carry"] + self.w[f"CNN_high_{k}/b_carry"])
            transformed = np.maximum(x @ self.w[f"CNN_high_{k}/W_transform"] + self.w[f"CNN_high_{k}/b_transform"], 0)
            x = gate * transformed + (1.0 - gate) * x
        if "CNN_proj/W_proj" in self.w:
            x = x @ self.w["CNN_proj/W_proj"] + self.w["CNN_proj/b_proj"]
        return x

    def lstm_layer(self, inputs, direction, layer, state):
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
        kernel, bias = self.w[f"{prefix}/W_0"], self.w[f"{prefix}/B"]
        projection = self.w.get(f"{prefix}/W_P_0")
        cell_clip, proj_clip = self.lstm["cell_clip"], self.lstm["proj_clip"]
        h, c = state
        outputs = []
        for x in inputs:
            z = np.concatenate([x, h]) @ kernel + bias
            i, j, f, o = np.split(z, 4)
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
            if cell_clip:
                self.cell_clips_fired += int(np.sum(np.abs(c) > cell_clip))
                c = np.clip(c, -cell_clip, cell_clip)
            h = _sigmoid(o) * np.tanh(c)
            if projection is not None:
                h = h @ projection
                if proj_clip:
                    self.proj_clips_fired += int(np.sum(np.abs(h) > proj_clip))
                    h = np.clip(h, -proj_clip, proj_clip)
            outputs.append(h)
        return outputs, (h, c)

    def run_direction(self, token_vectors, direction, states):
        layer_input, outputs, finals = token_vectors, [], []
        for layer in range(self.lstm["n_layers"]):
            output, final = self.lstm_layer(layer_input, direction, layer, states[layer])
            if layer > 0 and self.lstm["use_skip_connections"]:
                output = [o + x for o, x in zip(output, layer_input, strict=True)]
            outputs.append(output)
            finals.append(final)
            layer_input = output
        return outputs, finals

    def embed(self, tokens, state=None, keep_boundaries=False):
        """-> (n_layers + 1, len(tokens), 2P) (len(tokens) + 2 with <S> and </S> kept) and the final (forward,
        backward) per-layer states."""
        n_layers, p, d = self.lstm["n_layers"], self.lstm["projection_dim"], self.lstm["dim"]
        if state is None:
            zero = [(np.zeros(p), np.zeros(d)) for _ in range(n_layers)]
            state = (zero, zero)
        vectors = [self.token_vector(token) for token in ["<S>", *tokens, "</S>"]]
        forward, forward_final = self.run_direction(vectors, 0, state[0])
        backward, backward_final = self.run_direction(vectors[::-1], 1, state[1])
        layers = [np.concatenate([vectors, vectors], axis=1)]
        for k in range(n_layers):
            layers.append(np.concatenate([np.array(forward[k]), np.array(backward[k][::-1])], axis=1))
        stacked = np.stack(layers)
        return (stacked if keep_boundaries else stacked[:, 1:-1]), (forward_final, backward_final)


def case_model(case: str, directory: Path) -> tuple[BiLM, Reference]:
    """The float32 biLM of ``CASES[case]`` with random weights written to ``directory``, and its reference."""
    options = CASES[case]
    weight_file = directory / "weights.hdf5"
    random_weight_file(weight_file, BiLMConfig.from_options(options), seed=len(case))
    options_file = directory / "options.json"
    options_file.write_text(json.dumps(options))
    return load_bilm(options_file, weight_file), Reference.from_files(options_file, weight_file)
