"""`runner render`: the transport and recorder the LLM service is given to preview a run
(`sink`: answers nothing, each prompt printed and counted, with the cost estimate of what a run
would send; a sweep's cache-only settings too)."""
