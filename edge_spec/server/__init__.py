"""The OpenAI-compatible HTTP server (`create_app` in `edge_spec.server.app`; extra `serve`)."""
