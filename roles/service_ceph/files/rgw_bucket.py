"""Create an S3 bucket unless it exists: python3 rgw_bucket.py ENDPOINT BUCKET CREDENTIALS_FILE.

The keys are read from the credentials file (AWS's shared-credentials format, profile
default), never from the command line, so that they appear in no process list or log.
Prints "created" or "exists".
"""

import configparser
import sys

import boto3
from botocore.exceptions import ClientError

endpoint, bucket, path = sys.argv[1:4]
profile = configparser.ConfigParser()
profile.read(path)
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id=profile["default"]["aws_access_key_id"],
    aws_secret_access_key=profile["default"]["aws_secret_access_key"],
)
try:
    s3.head_bucket(Bucket=bucket)
    print("exists")
except ClientError as exc:
    if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
        raise
    s3.create_bucket(Bucket=bucket)
    print("created")
