"""The dispatcher's processes around its fold: the client a tenant embeds, the ticker, the REST API."""

from streams.dispatcher.client import Assigned, DispatcherClient, JobAssign, Written

__all__ = ["Assigned", "DispatcherClient", "JobAssign", "Written"]
