"""Sample databases for the tests of .sdb readers: bin/data_set_tool.py run in process, the layout of a
written database, and databases damaged in the ways a reader must name (test_sdb, test_container_index)."""
import struct

from bin import data_set_tool


def tool(*args):
    """bin/data_set_tool.py in this process (one worker: no pool), its exit code."""
    return data_set_tool.main(['--workers', '1'] + [str(a) for a in args])


def layout(data):
    """(samples start, index start, entry offsets) of a well-formed database's bytes."""
    (meta_length,) = struct.unpack_from('>Q', data, 8)
    samples_start = 16 + meta_length
    index_start = samples_start + 8 + struct.unpack_from('>Q', data, samples_start)[0]
    (count,) = struct.unpack_from('>Q', data, index_start + 8)
    return samples_start, index_start, list(struct.unpack_from('>{}Q'.format(count), data, index_start + 16))


def corrupt(data, case):
    """`data` (a well-formed database) damaged as `case` says, and the byte offset its error must name."""
    samples_start, index_start, offsets = layout(data)
    data = bytearray(data)
    if case == 'magic':
        return b'SAMPLEDX' + data[8:], 0
    if case == 'cut in the samples':
        return data[:index_start - 100], index_start
    if case == 'cut in the index':
        return data[:-4], index_start + 16
    if case == 'offset outside the samples':
        struct.pack_into('>Q', data, index_start + 24, len(data) + 100)
        return data, index_start + 24
    if case in ('entry length short', 'entry length long'):
        change = -1 if case.endswith('short') else 1
        struct.pack_into('>I', data, offsets[1], struct.unpack_from('>I', data, offsets[1])[0] + change)
        # short: the transcript's column runs past the entry; long: the columns do not fill it
        return data, offsets[1] + 8 + struct.unpack_from('>I', data, offsets[1] + 4)[0] if change < 0 else offsets[1]
    assert case == 'count'
    struct.pack_into('>Q', data, samples_start + 8, 4)
    return data, index_start
