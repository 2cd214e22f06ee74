"""MagiAttention: Flex-Flash-Attention over AttnSlice masks and context-parallel attention on top."""
__version__ = "0.1.0"
