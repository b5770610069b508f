"""Facts about one loaded frame before any analysis: the ``info`` summary and the sanity notes."""
