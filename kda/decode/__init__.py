"""Decode: the one-token recurrent step (FLA's fused_recurrent_kda) as designs on the simulated chip."""
