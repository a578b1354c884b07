#!/bin/bash
echo "custom bootstrap step" >> /var/log/custom.log
