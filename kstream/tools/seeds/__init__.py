"""The seeds' worked examples as demos: the token ring (seed 000) and the bank (seed 001)."""
