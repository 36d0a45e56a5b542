"""DeepSpeech-style speech recognition training (TensorFlow 1 graph style, optional Horovod)."""
