"""Analyses behind the paper's efficiency claims: training memory (``hot memory``) and backward
bit-operations (``hot gbops``)."""
