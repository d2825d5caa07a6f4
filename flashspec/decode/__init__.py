"""Decoding: `loop` (one request, the speculative loop), `batch` (many requests on one cache), `fused`
(a round as one sequence of device operations) and `monitor` (acceptance and speed per request type)."""
