"""Make a TF Lite flatbuffer from TensorFlow 2.15's converter loadable by the released clients.

deepspeech-tflite 0.9.3 runs a TF Lite 2.3 runtime and Coqui stt 1.4.0 a 2.9 one. Two things stand in
their way, both fixed here by editing the flatbuffer with TensorFlow's own schema classes:

* Dynamic-range quantised FULLY_CONNECTED ops come out as version 9 (inputs quantised asymmetrically at
  run time), which TF Lite 2.3 does not know. With symmetric input quantisation they are version 3,
  the hybrid kernel DeepSpeech's quantised releases used.
* The converter folds the `metadata_*` constants into constant output tensors that no operator
  produces. Both clients read the metadata by running the first operator on the path to each output
  (a constant output makes stt 1.4.0 crash), so each gets a GATHER of element 0 of the constant.
"""
import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

ASYMMETRIC_HYBRID_FULLY_CONNECTED, SYMMETRIC_HYBRID_FULLY_CONNECTED = 9, 3


def for_released_clients(tflite_model):
    """The same model, loadable by TF Lite 2.3 and the DeepSpeech / Coqui STT clients."""
    model = flatbuffer_utils.convert_bytearray_to_object(tflite_model)
    symmetric_hybrid_fully_connected(model)
    for subgraph in model.subgraphs:
        produce_constant_outputs(model, subgraph)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def builtin_code(opcode):
    return max(opcode.builtinCode, opcode.deprecatedBuiltinCode)


def symmetric_hybrid_fully_connected(model):
    codes = [i for i, opcode in enumerate(model.operatorCodes)
             if builtin_code(opcode) == schema.BuiltinOperator.FULLY_CONNECTED
             and opcode.version == ASYMMETRIC_HYBRID_FULLY_CONNECTED]
    for index in codes:
        model.operatorCodes[index].version = SYMMETRIC_HYBRID_FULLY_CONNECTED
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            if op.opcodeIndex in codes:
                op.builtinOptions.asymmetricQuantizeInputs = False


def produce_constant_outputs(model, subgraph):
    produced = {tensor for op in subgraph.operators for tensor in op.outputs}
    subgraph.outputs = [tensor if tensor in produced else gather_first(model, subgraph, tensor)
                        for tensor in subgraph.outputs]


def gather_first(model, subgraph, constant):
    """A new tensor, named as `constant` (renamed <name>/value), that a GATHER of its element 0 computes."""
    value = subgraph.tensors[constant]
    output = schema.TensorT()
    output.name, output.type, output.shape = value.name, value.type, value.shape
    value.name = value.name + b'/value'
    indices = schema.TensorT()
    indices.name, indices.type, indices.shape = output.name + b'/index', schema.TensorType.INT32, np.array([1])
    indices.buffer = add_buffer(model, np.zeros(1, np.int32).tobytes())
    op = schema.OperatorT()
    op.opcodeIndex = opcode_index(model, schema.BuiltinOperator.GATHER)
    op.builtinOptionsType, op.builtinOptions = schema.BuiltinOptions.GatherOptions, schema.GatherOptionsT()
    op.inputs = [constant, add_tensor(subgraph, indices)]
    op.outputs = [add_tensor(subgraph, output)]
    subgraph.operators.append(op)
    return op.outputs[0]


def add_tensor(subgraph, tensor):
    subgraph.tensors.append(tensor)
    return len(subgraph.tensors) - 1


def add_buffer(model, data):
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(data, np.uint8)
    model.buffers.append(buffer)
    return len(model.buffers) - 1


def opcode_index(model, code):
    """The index of version 1 of builtin `code`, added if the model has none."""
    for index, opcode in enumerate(model.operatorCodes):
        if builtin_code(opcode) == code and opcode.version == 1:
            return index
    opcode = schema.OperatorCodeT()
    opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), 1
    model.operatorCodes.append(opcode)
    return len(model.operatorCodes) - 1
