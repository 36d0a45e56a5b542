"""DeepSpeech 0.9's alphabets: the label <-> character mapping of the acoustic model's outputs.

Written here (DeepSpeech's native_client/alphabet.cc, read line by line) because the package that
carried them, ds_ctcdecoder, has wheels for Python 3.9 only. The method names are DeepSpeech's, so code
written against ds_ctcdecoder.Alphabet keeps working. Unlike DeepSpeech's, an unknown character or
label raises KeyError instead of aborting the process.
"""
import struct


class Alphabet:
    """An alphabet file: one label per line in label order, lines starting with '#' are comments, a line
    holding '\\#' is the label '#', empty lines are skipped, '\\r\\n' endings are read as '\\n'."""

    def __init__(self, config_path=None, labels=None):
        if labels is None:
            labels = self._read(config_path)
        self.labels = list(labels)
        self.label_of = {label: index for index, label in enumerate(self.labels)}

    @staticmethod
    def _read(path):
        with open(path, 'rb') as file:
            text = file.read().decode('utf-8')
        labels = []
        for line in text.replace('\r\n', '\n').replace('\r', '\n').split('\n'):
            if line == '\\#':
                line = '#'
            elif line.startswith('#'):
                continue
            if line:
                labels.append(line)
        return labels

    def GetSize(self):  # noqa: N802 (DeepSpeech's names)
        return len(self.labels)

    def GetSpaceLabel(self):  # noqa: N802
        """The label of ' ', or -2 as DeepSpeech's when the alphabet has no space."""
        return self.label_of.get(' ', -2)

    def CanEncodeSingle(self, char):  # noqa: N802
        return char in self.label_of

    def CanEncode(self, text):  # noqa: N802
        return all(self.CanEncodeSingle(char) for char in self.units(text))

    def EncodeSingle(self, char):  # noqa: N802
        return self.label_of[char]

    def Encode(self, text):  # noqa: N802
        """One label per code point (DeepSpeech's split_into_codepoints)."""
        return [self.EncodeSingle(unit) for unit in self.units(text)]

    def DecodeSingle(self, label):  # noqa: N802
        return self.labels[label]

    def Decode(self, labels):  # noqa: N802
        return ''.join(self.DecodeSingle(label) for label in labels)

    def units(self, text):
        return list(text)

    def Serialize(self):  # noqa: N802
        """The exported model's metadata_alphabet: uint16 count, then per label uint16 label, uint16 byte
        length and the UTF-8 bytes. DeepSpeech wrote the pairs in its hash map's order, which the clients
        read into a map; this writes them in label order."""
        out = [struct.pack('<H', self.GetSize())]
        for index, label in enumerate(self.labels):
            encoded = self.label_bytes(label)
            out.append(struct.pack('<HH', index, len(encoded)) + encoded)
        return b''.join(out)

    @staticmethod
    def label_bytes(label):
        return label.encode('utf-8')


class UTF8Alphabet(Alphabet):
    """--bytes_output_mode: 255 labels, label i is the byte i + 1 (so the space, 0x20, is label 31); a
    text is encoded as its UTF-8 bytes and labels decode to bytes, then to text."""

    def __init__(self):
        super().__init__(labels=[bytes([byte]) for byte in range(1, 256)])

    def GetSpaceLabel(self):  # noqa: N802
        return ord(' ') - 1

    def CanEncodeSingle(self, char):  # noqa: N802
        return True

    def EncodeSingle(self, unit):  # noqa: N802
        return self.label_of[unit if isinstance(unit, bytes) else unit.encode('utf-8')]

    def units(self, text):
        return [bytes([byte]) for byte in text.encode('utf-8')]

    def DecodeSingle(self, label):  # noqa: N802
        return self.labels[label].decode('utf-8', errors='replace')

    def Decode(self, labels):  # noqa: N802
        return b''.join(self.labels[label] for label in labels).decode('utf-8', errors='replace')

    @staticmethod
    def label_bytes(label):
        return label
