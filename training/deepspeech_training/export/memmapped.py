"""TensorFlow's memmapped model container (.pbmm), as `convert_graphdef_memmapped_format` writes it.

A client that opens it through a MemmappedEnv (DeepSpeech's does for files named *.pbmm) maps the
weights from the file instead of copying them onto the heap. Layout: each large constant's raw tensor
bytes at a 64-byte aligned offset (a Const node becomes an ImmutableConst naming that region), then
the GraphDef, then a MemmappedFileSystemDirectory proto listing every region, then the directory's
offset as a little-endian uint64.
"""
import copy
import re
import struct

import numpy as np
import tensorflow.compat.v1 as tfv1
from tensorflow.core.util.memmapped_file_system_pb2 import MemmappedFileSystemDirectory

PREFIX = 'memmapped_package://'
GRAPH_REGION = PREFIX + '.'
ALIGNMENT = 64   # TensorFlow's Allocator::kAllocatorAlignment: what ImmutableConst's mapped tensors need
# The converter's default: smaller constants stay in the graph.
MIN_CONVERSION_BYTES = 10000


def region_name(node_name, used):
    """The node's name in the characters a region may use, made unique as the converter does."""
    name = re.sub(r'[^A-Za-z0-9_.]', '_', node_name)
    while name in used:
        name += '_'
    used.add(name)
    return PREFIX + name


def to_immutable(node, region, tensor_proto):
    """Turn Const `node` into an ImmutableConst reading `region`."""
    node.op = 'ImmutableConst'
    node.ClearField('attr')
    node.attr['dtype'].type = tensor_proto.dtype
    node.attr['shape'].shape.CopyFrom(tensor_proto.tensor_shape)
    node.attr['memory_region_name'].s = region.encode()


def memmapped(graph_def, min_bytes=MIN_CONVERSION_BYTES):
    """The .pbmm bytes of a frozen graph: numeric constants of at least min_bytes are mapped regions."""
    graph_def = copy.deepcopy(graph_def)
    directory = MemmappedFileSystemDirectory()
    out, used = bytearray(), set()

    def add_region(name, data):
        element = directory.element.add()
        element.name, element.offset, element.length = name, len(out), len(data)
        out.extend(data)

    for node in graph_def.node:
        if node.op != 'Const' or node.attr['value'].tensor.dtype == tfv1.string.as_datatype_enum:
            continue
        tensor_proto = node.attr['value'].tensor
        data = np.ascontiguousarray(tfv1.make_ndarray(tensor_proto)).tobytes()
        if len(data) < min_bytes:
            continue
        out.extend(b'\0' * (-len(out) % ALIGNMENT))
        name = region_name(node.name, used)
        add_region(name, data)
        to_immutable(node, name, tensor_proto)
    add_region(GRAPH_REGION, graph_def.SerializeToString())
    directory_offset = len(out)
    out.extend(directory.SerializeToString())
    out.extend(struct.pack('<Q', directory_offset))
    return bytes(out)
