"""Pieces of the distributed deployment on one machine (issue 33): each starts real servers and stops them."""
