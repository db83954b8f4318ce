"""A request to a model and its answer: specs (spec.py) and each model's transport (routing.py:
http.py for OpenAI-compatible servers, transport.py for litellm), sending with limits, retries
and deadlines (sender.py, limits.py), structured output (structured.py), token usage
(transport.py) and prices (prices.py), and reading an answer (parsing.py)."""
