"""The HTTP face: the Starlette app (`create_app`), the handlers of the public routes (the table
lives in `httpapi`), the WebSocket route and the uvicorn settings."""
