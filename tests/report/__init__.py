"""Tests of specload.report."""
