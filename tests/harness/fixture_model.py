"""A small model in the Hub's own layout, for the fixture Hub and the fixture vLLM.

config.json names a Llama architecture with small dimensions; the weights are a model.safetensors written with the
real safetensors library (tensors named and shaped as the configuration says, a few MB), with its index; the
tokenizer files are those a Llama repository carries. A repository on the Hub also holds files vLLM does not read:
README.md, and the same weights again as a PyTorch pickle (pytorch_model.bin), which the default file patterns
leave out.
"""

import json

import numpy
from safetensors.numpy import save

ARCHITECTURE = "LlamaForCausalLM"


def config(hidden=256, layers=2, vocab=2048):
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "float16",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


def weights(settings, seed):
    """The tensors a Llama checkpoint of these dimensions holds, filled from seed."""
    generator = numpy.random.default_rng(seed)
    hidden, vocab = settings["hidden_size"], settings["vocab_size"]

    def tensor(*shape):
        return generator.standard_normal(shape).astype(numpy.float16)

    tensors = {"model.embed_tokens.weight": tensor(vocab, hidden), "lm_head.weight": tensor(vocab, hidden)}
    for layer in range(settings["num_hidden_layers"]):
        prefix = "model.layers.%d." % layer
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[prefix + "self_attn.%s.weight" % name] = tensor(hidden, hidden)
        tensors[prefix + "mlp.gate_proj.weight"] = tensor(settings["intermediate_size"], hidden)
        tensors[prefix + "mlp.up_proj.weight"] = tensor(settings["intermediate_size"], hidden)
        tensors[prefix + "mlp.down_proj.weight"] = tensor(hidden, settings["intermediate_size"])
        tensors[prefix + "input_layernorm.weight"] = numpy.ones(hidden, dtype=numpy.float16)
        tensors[prefix + "post_attention_layernorm.weight"] = numpy.ones(hidden, dtype=numpy.float16)
    tensors["model.norm.weight"] = numpy.ones(hidden, dtype=numpy.float16)
    return tensors


def tokenizer(vocab):
    """A byte-level BPE tokenizer.json of the tokenizers library's format, its vocabulary the byte symbols."""
    symbols = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for index in range(256):
        symbols["<0x%02X>" % index] = len(symbols)
    return {
        "version": "1.0",
        "added_tokens": [
            {"id": i, "content": t, "special": True, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False}
            for t, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": symbols,
                  "merges": []},
    }  # fmt: skip


# What the collection's default file patterns (module_utils/models.py DEFAULT_FILES and DEFAULT_IGNORE) take of
# files(): not pytorch_model.bin (the same weights again) nor README.md.
DEFAULT_SELECTION = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
]


def files(seed=0, hidden=256, layers=2, vocab=2048, readme="A fixture model.\n"):
    """{path: bytes} of the repository: what a Llama repository on the Hub holds, in small."""
    settings = config(hidden, layers, vocab)
    tensors = weights(settings, seed)
    blob = save(tensors, metadata={"format": "pt"})
    index = {
        "metadata": {"total_size": sum(array.nbytes for array in tensors.values())},
        "weight_map": {name: "model.safetensors" for name in sorted(tensors)},
    }
    return {
        "config.json": json.dumps(settings, indent=2).encode(),
        "generation_config.json": json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}).encode(),
        "model.safetensors": blob,
        "model.safetensors.index.json": json.dumps(index, indent=2).encode(),
        "tokenizer.json": json.dumps(tokenizer(vocab)).encode(),
        "tokenizer_config.json": json.dumps(
            {
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 2048,
                "tokenizer_class": "PreTrainedTokenizerFast",
            }
        ).encode(),  # fmt: skip
        "special_tokens_map.json": json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}).encode(),
        # Not read by vLLM when safetensors exist: the default file patterns leave them on the Hub.
        "pytorch_model.bin": blob,
        "README.md": readme.encode(),
    }
