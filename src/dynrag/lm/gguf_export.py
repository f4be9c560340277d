"""A fine-tuned HF directory written back as GGUF, so the llama.cpp backend can run a checkpoint
that `dynrag train` made from a bundled model.

The checkpoint keeps its base's architecture, shapes and tokenizer (training changes weights only),
so the export copies every metadata field of the base's GGUF file (tokenizer, chat template, rope
settings) and replaces the tensors: matrices as Q8_0 (8-bit blocks of 32, close to lossless and
half the size of F16), vectors (norms, biases) as F32. HF names map to GGUF names with gguf-py's
own table for the architecture, the table llama.cpp's converter uses; a tensor of the base that the
checkpoint lacks, or a shape that differs, is an error naming it.

Llama-architecture GGUF files keep each attention head's query and key rows with the rotary pairs
interleaved, where HF keeps them as two halves (transformers undoes the interleaving when it loads
a GGUF), so those rows are reordered on the way back. Only the architectures whose round trip is
tested are exported: Gemma's GGUF files, for one, also store norm weights with an offset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dynrag.errors import DynragError
from dynrag.io.directories import atomic_directory

EXPORTED_FILE = "model.gguf"
# Block size of Q8_0: a matrix whose rows are not a multiple of it is kept as F16.
Q8_BLOCK = 32
# The architectures a round trip (base GGUF -> HF -> GGUF) is tested on, and whether each
# interleaves the rotary halves of its query and key rows.
EXPORTABLE = {"qwen2": False, "llama": True}


def rope_interleave(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Query or key rows from HF's order (each head's rotary dimensions as two halves) to GGUF's
    (the halves' rows alternating), for ``n_head`` heads; rows [0, 1, 2, 3] of one head become
    [0, 2, 1, 3]."""
    head_dim = weights.shape[0] // n_head
    split = weights.reshape(n_head, 2, head_dim // 2, *weights.shape[1:])
    return split.swapaxes(1, 2).reshape(weights.shape)


def block_role(gguf_name: str) -> str | None:
    """The role of a block's weight matrix in its GGUF name (``blk.3.attn_q.weight`` -> ``attn_q``),
    None for a bias or a tensor outside the blocks."""
    parts = gguf_name.split(".")
    return parts[2] if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" else None


def gguf_tensor_name(hf_name: str, arch: str, n_blocks: int) -> str | None:
    """The GGUF name of an HF tensor for ``arch`` (the base's ``general.architecture``), or None
    when the table has no entry (a tied output head, rotary caches)."""
    import gguf

    arches = {name: enum for enum, name in gguf.MODEL_ARCH_NAMES.items()}
    if arch not in arches:
        raise DynragError(f"GGUF export: architecture {arch!r} is not one gguf-py knows")
    table = gguf.get_tensor_name_map(arches[arch], n_blocks)
    return table.get_name(hf_name, try_suffixes=(".weight", ".bias"))


def storage_type(shape: tuple[int, ...]) -> Any:
    """How a tensor of this (numpy-order) shape is stored: Q8_0 for matrices whose rows split into
    32-blocks, F16 for other matrices, F32 for vectors (llama.cpp keeps norms in F32)."""
    import gguf

    if len(shape) < 2:
        return gguf.GGMLQuantizationType.F32
    return gguf.GGMLQuantizationType.Q8_0 if shape[-1] % Q8_BLOCK == 0 else gguf.GGMLQuantizationType.F16


def encode(values: np.ndarray, qtype: Any) -> np.ndarray:
    """The bytes (or typed array) gguf-py writes for ``values`` stored as ``qtype``."""
    import gguf

    if qtype == gguf.GGMLQuantizationType.F32:
        return values.astype(np.float32)
    if qtype == gguf.GGMLQuantizationType.F16:
        return values.astype(np.float16)
    return gguf.quants.quantize(values.astype(np.float32), qtype)


def hf_tensors(directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of the HF directory's safetensors files, as float32 numpy arrays."""
    from safetensors.numpy import load_file

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise DynragError(f"GGUF export: no *.safetensors in {directory}")
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        try:
            tensors.update(load_file(str(file)))
        except TypeError:  # bf16 has no numpy type: read through torch
            from safetensors.torch import load_file as load_torch

            tensors.update({k: v.float().numpy() for k, v in load_torch(str(file)).items()})
    return {name: np.asarray(t, dtype=np.float32) for name, t in tensors.items()}


def mapped_tensors(tensors: dict[str, np.ndarray], arch: str, n_blocks: int) -> dict[str, np.ndarray]:
    """The HF tensors under their GGUF names (those the table does not know left out)."""
    out: dict[str, np.ndarray] = {}
    for hf_name, values in tensors.items():
        name = gguf_tensor_name(hf_name, arch, n_blocks)
        if name is not None:
            out[name] = values
    return out


def export_gguf(checkpoint: Path, base_gguf: Path, out: Path) -> Path:
    """Write ``checkpoint`` (an HF directory fine-tuned from the model in ``base_gguf``) as
    ``out/model.gguf``, atomically; returns the file."""
    import gguf

    reader = gguf.GGUFReader(str(base_gguf))
    arch = str(reader.fields["general.architecture"].contents())
    if arch not in EXPORTABLE:
        raise DynragError(
            f"GGUF export: {base_gguf.name} is a {arch!r} model; exportable: {', '.join(sorted(EXPORTABLE))}"
        )
    n_blocks = int(reader.fields[f"{arch}.block_count"].contents())
    weights = mapped_tensors(hf_tensors(checkpoint), arch, n_blocks)
    if EXPORTABLE[arch]:
        heads = {"attn_q": int(reader.fields[f"{arch}.attention.head_count"].contents()),
                 "attn_k": int(reader.fields[f"{arch}.attention.head_count_kv"].contents())}
        weights = {name: rope_interleave(values, heads[role]) if (role := block_role(name)) in heads else values
                   for name, values in weights.items()}
    planned = []
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists dimensions innermost first
        if tensor.name not in weights:
            raise DynragError(f"GGUF export: {checkpoint} has no tensor for {tensor.name!r} of {base_gguf.name}")
        if tuple(weights[tensor.name].shape) != shape:
            raise DynragError(
                f"GGUF export: {tensor.name!r} is {tuple(weights[tensor.name].shape)} in {checkpoint}, "
                f"{shape} in {base_gguf.name}; the checkpoint was not trained from this base"
            )
        planned.append((tensor.name, weights[tensor.name]))
    with atomic_directory(out) as tmp:
        writer = gguf.GGUFWriter(str(tmp / EXPORTED_FILE), arch)
        copy_metadata(reader, writer)
        for name, values in planned:
            qtype = storage_type(values.shape)
            writer.add_tensor(name, encode(values, qtype), raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out / EXPORTED_FILE


def copy_metadata(reader: Any, writer: Any) -> None:
    """The base's key-value fields, but for those the writer sets itself and the file type (now
    mostly Q8_0)."""
    import gguf

    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
