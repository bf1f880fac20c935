"""Money: dollars per hour, per TFLOP-hour, per unit of work; cost of ownership and buy-vs-rent break-even. Pure
functions of numbers; imports nothing of the service.
"""
