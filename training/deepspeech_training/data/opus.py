"""DeepSpeech's own Opus framing (`application/vnd.mozilla.opus`, as inside its sample databases).

Big-endian header: PCM byte length (4 bytes), sample rate (4), channels (1), sample width (1); then one
Opus packet per 60 ms of audio, each prefixed by its byte length (2 bytes). The last frame is padded
with zeros before encoding (DeepSpeech does so to keep the encoder deterministic) and the decoded PCM
is cut back to the header's length. Layout as DeepSpeech 0.9's util/audio.py write_opus/read_opus.
"""
import struct

HEADER = struct.Struct('>IIBB')
PACKET_LENGTH = struct.Struct('>H')
FRAME_MS = 60
SAMPLE_WIDTH = 2            # libopus encodes and decodes 16-bit PCM
RATES = (8000, 12000, 16000, 24000, 48000)   # the only sample rates libopus encodes (its codec, as libsndfile's)


class OpusError(ValueError):
    """Opus data that cannot be encoded or decoded; the message says what is wrong."""


def frame_size(rate):
    """Samples per channel in one 60 ms packet."""
    return FRAME_MS * rate // 1000


def read_header(data):
    """(pcm byte length, rate, channels, width) of framed Opus `data`."""
    if len(data) < HEADER.size:
        raise OpusError('{} byte(s), shorter than the {}-byte Opus header'.format(len(data), HEADER.size))
    return HEADER.unpack_from(data)


def packets(data):
    """The Opus packets of framed `data`; raises OpusError where a length runs past the end."""
    position, found = HEADER.size, []
    while position < len(data):
        if position + PACKET_LENGTH.size > len(data):
            raise OpusError('a packet length at byte {} runs past the end ({} bytes)'.format(position, len(data)))
        (length,) = PACKET_LENGTH.unpack_from(data, position)
        position += PACKET_LENGTH.size
        if position + length > len(data):
            raise OpusError('a {}-byte packet at byte {} runs past the end ({} bytes)'
                            .format(length, position, len(data)))
        found.append(data[position:position + length])
        position += length
    return found


def check_header(data):
    """The header at the start of framed `data`, checked for what Opus can hold."""
    pcm_length, rate, channels, width = read_header(data)
    if rate not in RATES or channels not in (1, 2) or width != SAMPLE_WIDTH:
        raise OpusError('header says {} Hz, {} channel(s), {} byte(s) per sample: Opus needs one of {} Hz, 1 or 2 '
                        'channels, 2 bytes'.format(rate, channels, width, ', '.join(map(str, RATES))))
    return pcm_length, rate, channels, width


def check(data):
    """The header of framed `data` after checking that its packets cover its PCM length (cheap: nothing
    is decoded)."""
    pcm_length, rate, channels, width = check_header(data)
    covered = len(packets(data)) * frame_size(rate) * channels * width
    if covered < pcm_length:
        raise OpusError('its packets hold {} PCM byte(s), the header says {}'.format(covered, pcm_length))
    return pcm_length, rate, channels, width


def encode(pcm, rate, channels, bitrate=None):
    """Framed Opus of 16-bit PCM bytes `pcm` (DeepSpeech's encoder settings: application 'audio')."""
    import opuslib  # noqa: E402 -- libopus is needed only where Opus is used
    if rate not in RATES:
        raise OpusError('{} Hz: Opus encodes only {} Hz (resample the audio, or use --audio_type wav)'
                        .format(rate, ', '.join(map(str, RATES))))
    encoder = opuslib.Encoder(rate, channels, 'audio')
    if bitrate is not None:
        encoder.bitrate = bitrate
    samples = frame_size(rate)
    chunk_bytes = samples * channels * SAMPLE_WIDTH
    parts = [HEADER.pack(len(pcm), rate, channels, SAMPLE_WIDTH)]
    for start in range(0, len(pcm), chunk_bytes):
        packet = encoder.encode(pcm[start:start + chunk_bytes].ljust(chunk_bytes, b'\0'), samples)
        parts += [PACKET_LENGTH.pack(len(packet)), packet]
    return b''.join(parts)


def decode(data):
    """(16-bit PCM bytes, rate, channels) of framed Opus `data`."""
    import opuslib  # noqa: E402
    pcm_length, rate, channels, _ = check(data)
    decoder = opuslib.Decoder(rate, channels)
    pcm = bytearray()
    try:
        for packet in packets(data):
            if len(pcm) >= pcm_length:
                break
            pcm += decoder.decode(packet, frame_size(rate))
    except opuslib.OpusError as error:
        raise OpusError('libopus cannot decode a packet: {}'.format(error)) from None
    return bytes(pcm[:pcm_length]), rate, channels
