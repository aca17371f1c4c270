"""The web practice app behind `alignlings serve`: see :func:`alignlings.web.app.create_app`."""
