"""`dynrag serve`: dynrag behind an OpenAI-compatible HTTP API, with a trace viewer at `/`.

`app.py` builds the FastAPI app; `engine.py` answers one question with a method over the loaded
model and index; `queue.py` runs the model one request at a time behind a bounded queue;
`cancel.py` lets a timeout or a client disconnect stop a method between tokens; `limits.py` holds
the settings and the ASGI middleware (bearer key, body size, request ids); `schemas.py` the
request models and OpenAI's response and error shapes; `static/` the viewer (plain HTML/JS/CSS).
"""
