"""Placeholder server: /healthz only, until the daemon lands."""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def create_app() -> Starlette:
    return Starlette(routes=[Route("/healthz", healthz)])


def serve(args: argparse.Namespace) -> int:
    uvicorn.run(create_app(), host=args.host, port=args.port, ws_per_message_deflate=False)
    return 0
