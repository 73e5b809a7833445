"""Task models on ELMo features: a BiLSTM-CRF sequence tagger and a BiLSTM sentence classifier over the
task-learned scalar mix of the biLM's layers (optionally with static word vectors), trained on layers cached
once in HDF5, with the static-vector baselines on the same model and the per-layer probes."""
