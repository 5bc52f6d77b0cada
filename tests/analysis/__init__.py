"""Tests of specload.analysis (package so module names never clash across test folders)."""
