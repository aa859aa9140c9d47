"""The routes of ``aifabric serve``, one :class:`fastapi.APIRouter` per area:
:mod:`.page` (the page, its static files, the ``/api`` listing), :mod:`.views`
(info, topology, segment, search, heatmap), :mod:`.trace`, :mod:`.whatif`,
:mod:`.run` (the run folder's files and tables) and :mod:`.lab`.
:func:`aifabric.web.app.create_app` includes them in that order."""
