"""The domain nouns: a brief (`AdviceRequest`, `Brief`), the advice answered (`Advice`, `Candidate`, ...), the GPU
catalog with its dated prices and the rules' assumptions. Frozen dataclasses and their vocabularies, no I/O.
May import: physics (for the architecture bands an assumption names), memo. Nothing above.
"""
